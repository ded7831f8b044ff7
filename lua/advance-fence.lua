-- advance-fence: raises a wallet's fence counter to at least a given value and never lowers
-- it. Used after Redis lost its data: the database knows the highest token it has accepted,
-- and the next token issued must be above it.
--
-- KEYS[1]  fence key  <prefix>{wallet:<id>}:fence
-- ARGV[1]  the lowest value the counter may hold afterwards: a decimal integer in [0, 2^53),
--          without sign or leading zeros
--
-- Reply    { 'raised', '<fence>' }     the counter was lower and now equals ARGV[1]
--          { 'unchanged', '<fence>' }  the counter already was at least ARGV[1]
--          fence as a decimal string; the next acquire issues fence + 1
--
-- Numbers in Redis Lua are doubles: integers are exact below 2^53, so ARGV[1] is refused at
-- and above it (the caller checks this too). A counter at or above 2^53 rounds to a double
-- that is still >= 2^53 > ARGV[1], so the comparison stays right. The new value is written
-- from the ARGV string itself, never through tostring (which keeps 14 significant digits).

local EXACT_INTEGER_LIMIT = 9007199254740992 -- 2^53

local target_text = ARGV[1]
if not (target_text == '0' or string.match(target_text, '^[1-9]%d*$')) then
  return redis.error_reply('ERR advance-fence: the target must be a decimal integer without sign or leading zeros')
end
local target = tonumber(target_text)
if target >= EXACT_INTEGER_LIMIT then
  return redis.error_reply('ERR advance-fence: the target must be below 2^53')
end

local current_text = redis.call('GET', KEYS[1])
if not current_text then
  current_text = '0'
end
local current = tonumber(current_text)
if current == nil then
  return redis.error_reply('ERR advance-fence: the fence counter holds a non-number')
end

if current < target then
  redis.call('SET', KEYS[1], target_text)
  return { 'raised', target_text }
end
return { 'unchanged', current_text }
