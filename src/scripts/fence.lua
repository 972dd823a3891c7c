-- Fencing: a holder's token is admitted when it is not older than the
-- newest token the store has seen; the newest is remembered, refusals are
-- counted. Both the read and the write go through this: fencing only the
-- write would let two holders read the same stock.
local function admit(ledger, token)
  local seen = tonumber(redis.call('HGET', ledger, 'fence_seen') or '0')
  token = tonumber(token)
  if token < seen then
    redis.call('HINCRBY', ledger, 'fenced_rejections', 1)
    return false
  end
  if token > seen then
    redis.call('HSET', ledger, 'fence_seen', token)
  end
  return true
end
