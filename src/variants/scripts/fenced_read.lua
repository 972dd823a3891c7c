-- Read the stock only for a holder whose fencing token is not older than
-- the newest one the store has seen. Reading is fenced too: fencing only
-- the write would let two holders read the same stock and both sell it.
-- KEYS: stock, ledger   ARGV: token
-- Returns the stock, or nil when the token is stale (counted).
local seen = tonumber(redis.call('HGET', KEYS[2], 'fence_seen') or '0')
local token = tonumber(ARGV[1])
if token < seen then
  redis.call('HINCRBY', KEYS[2], 'fenced_rejections', 1)
  return false
end
if token > seen then
  redis.call('HSET', KEYS[2], 'fence_seen', token)
end
return tonumber(redis.call('GET', KEYS[1]) or '0')
