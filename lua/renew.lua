-- renew: extends the lock's TTL, but only while the caller still owns the lock.
--
-- KEYS[1]  lock key  <prefix>{wallet:<id>}:lock
-- ARGV[1]  owner id the caller acquired with
-- ARGV[2]  new TTL in milliseconds, a positive decimal integer
--
-- Reply    1  still ours; the TTL now is ARGV[2]
--          0  not ours: expired, released, or taken by another owner (nothing changed)

if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
