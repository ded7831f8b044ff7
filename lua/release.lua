-- release: deletes each given lock, but only if the caller still owns it; a stale holder whose
-- lease expired and was taken over must not delete the new holder's lock. The worker sends the
-- releases of one event-loop turn in one call; each lock is decided on its own.
--
-- For lock i = 1..n (n = #KEYS):
-- KEYS[i]  lock key  <prefix>{wallet:<id>}:lock
-- ARGV[i]  owner id the caller acquired with
--
-- Reply    one integer per lock, in order:
--          1  it was ours and is deleted
--          0  not ours (expired or another owner): nothing deleted

local replies = {}
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[i] then
    replies[i] = redis.call('DEL', KEYS[i])
  else
    replies[i] = 0
  end
end
return replies
