-- Write the stock only for a holder whose fencing token is not older than
-- the newest one seen: a holder that woke from a pause after its lease ran
-- out, and after a newer holder came, is refused here, whatever it believes.
-- KEYS: stock, ledger   ARGV: token, new stock
-- Returns 1, or nil when the token is stale (counted).
local seen = tonumber(redis.call('HGET', KEYS[2], 'fence_seen') or '0')
local token = tonumber(ARGV[1])
if token < seen then
  redis.call('HINCRBY', KEYS[2], 'fenced_rejections', 1)
  return false
end
if token > seen then
  redis.call('HSET', KEYS[2], 'fence_seen', token)
end
redis.call('SET', KEYS[1], ARGV[2])
return 1
