-- release: deletes the lock, but only if the caller still owns it; a stale holder whose
-- lease expired and was taken over must not delete the new holder's lock.
--
-- KEYS[1]  lock key  <prefix>{wallet:<id>}:lock
-- ARGV[1]  owner id the caller acquired with
--
-- Reply    1  it was ours and is deleted
--          0  not ours (expired or another owner): nothing deleted

if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
