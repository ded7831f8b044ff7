-- acquire: takes the fenced lock of one wallet and, only when that succeeds, issues a new
-- fencing token. A failed attempt issues nothing: wasting numbers would hide nothing.
--
-- Safe to send twice. The owner id is random per acquisition, so a lock key that already holds
-- ARGV[1] was written by an earlier run of this very call whose reply never arrived (ioredis
-- resends unanswered commands after a reconnect). That run's token reached nobody; the repeat
-- keeps the lock (its TTL unchanged) and issues a fresh token, strictly above every token
-- issued before, advance-fence's included. Answering `busy` instead would leave the wallet
-- locked by nobody for a whole TTL.
--
-- KEYS[1]  lock key   <prefix>{wallet:<id>}:lock   value: the owner id, with a PX TTL
-- KEYS[2]  fence key  <prefix>{wallet:<id>}:fence  an integer counter that never expires
--          (both keys carry the same hash tag, so they live in one Redis Cluster slot)
-- ARGV[1]  owner id, random per acquisition
-- ARGV[2]  lock TTL in milliseconds, a positive decimal integer
--
-- Reply    { 'ok', '<token>' }  we hold the lock; the token as a decimal string, exact up to
--                               2^63-1, strictly greater than every token issued before
--                               (also when the lock already held ARGV[1]: a repeat)
--          { 'busy', <pttl> }   another owner holds it; pttl = its remaining TTL in ms
--                               (-1 if the key has no TTL, which only a foreign writer causes)
--          an error reply       the fence counter is not an integer (or at its maximum); the
--                               lock is given back, nothing is held

if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return { 'busy', redis.call('PTTL', KEYS[1]) }
  end
  -- A repeat: the lock is ours already. Not the earlier token read back from the counter: an
  -- advance-fence since then may have raised the counter to a token the database has seen.
end

local incremented = redis.pcall('INCR', KEYS[2])
if type(incremented) == 'table' and incremented.err then
  -- Scripts are not rolled back on error: release the lock rather than leave it held, with no
  -- token, for a whole TTL.
  redis.call('DEL', KEYS[1])
  return incremented
end

-- Not tostring(incremented): INCR's reply reaches Lua as a double and tostring keeps only 14
-- significant digits (1e14 and above come out as "1e+14"). GET returns the counter exactly
-- as Redis stores it.
return { 'ok', redis.call('GET', KEYS[2]) }
