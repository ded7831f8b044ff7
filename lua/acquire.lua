-- acquire: takes the fenced locks of one or more wallets and, for each lock it takes, issues a
-- new fencing token. A failed attempt issues nothing: wasting numbers would hide nothing. The
-- worker sends the acquisitions of one event-loop turn in one call (one round trip and one
-- script run for the wallets of a batch); every wallet is decided on its own, exactly as if it
-- had been sent alone, in the order given.
--
-- Safe to send twice. The owner id is random per acquisition, so a lock key that already holds
-- its owner id was written by an earlier run of this very call whose reply never arrived (ioredis
-- resends unanswered commands after a reconnect). That run's token reached nobody; the repeat
-- keeps the lock (its TTL unchanged) and issues a fresh token, strictly above every token
-- issued before, advance-fence's included. Answering `busy` instead would leave the wallet
-- locked by nobody for a whole TTL.
--
-- For wallet i = 1..n (n = #KEYS / 2):
-- KEYS[2i-1]  lock key   <prefix>{wallet:<id>}:lock   value: the owner id, with a PX TTL
-- KEYS[2i]    fence key  <prefix>{wallet:<id>}:fence  an integer counter that never expires
--             (both keys carry the wallet's hash tag, so they live in one Redis Cluster slot; in
--             a cluster the worker sends one wallet per call)
-- ARGV[2i-1]  owner id, random per acquisition
-- ARGV[2i]    lock TTL in milliseconds, a positive decimal integer
--
-- Reply    one entry per wallet, in order:
--          { 'ok', '<token>' }   we hold the lock; the token as a decimal string, exact up to
--                                2^63-1, strictly greater than every token issued before
--                                (also when the lock already held the owner id: a repeat)
--          { 'busy', <pttl> }    another owner holds it; pttl = its remaining TTL in ms
--                                (-1 if the key has no TTL, which only a foreign writer causes)
--          { 'error', '<msg>' }  the fence counter is not an integer (or at its maximum); that
--                                wallet's lock is given back, nothing is held

local replies = {}
for i = 1, #KEYS / 2 do
  local lock_key, fence_key = KEYS[2 * i - 1], KEYS[2 * i]
  local owner, ttl = ARGV[2 * i - 1], ARGV[2 * i]
  local reply
  if not redis.call('SET', lock_key, owner, 'NX', 'PX', ttl) and redis.call('GET', lock_key) ~= owner then
    reply = { 'busy', redis.call('PTTL', lock_key) }
  else
    -- Taken, or a repeat: the lock is ours already. Not the earlier token read back from the
    -- counter: an advance-fence since then may have raised the counter to a token the database
    -- has seen.
    local incremented = redis.pcall('INCR', fence_key)
    if type(incremented) == 'table' and incremented.err then
      -- Scripts are not rolled back on error: release the lock rather than leave it held, with
      -- no token, for a whole TTL.
      redis.call('DEL', lock_key)
      reply = { 'error', incremented.err }
    else
      -- Not tostring(incremented): INCR's reply reaches Lua as a double and tostring keeps only
      -- 14 significant digits (1e14 and above come out as "1e+14"). GET returns the counter
      -- exactly as Redis stores it.
      reply = { 'ok', redis.call('GET', fence_key) }
    end
  end
  replies[i] = reply
end
return replies
