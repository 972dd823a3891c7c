-- Fencing: a holder's token is admitted when it is not older than the
-- newest token the store has seen from the same source, and the same store
-- of that source: the `fenced` counter, etcd revisions and ZooKeeper czxids
-- are different clocks, and a fresh etcd or ZooKeeper counts again from the
-- start. The newest is remembered per source (fence_seen:SOURCE, with
-- fence_store:SOURCE), refusals are counted (all sources together). Both
-- the read and the write go through this: fencing only the write would let
-- two holders read the same stock. A token that is no number is an error,
-- raised before anything is written.
local function admit(ledger, source, store, token)
  local number = tonumber(token)
  if not number then error('fencing token is not a number: ' .. tostring(token)) end
  local seen_field, store_field = 'fence_seen:' .. source, 'fence_store:' .. source
  local kept = redis.call('HMGET', ledger, seen_field, store_field)
  local same_store = (kept[2] or '') == store
  local seen = 0
  if same_store then seen = tonumber(kept[1] or '0') end
  if number < seen then
    redis.call('HINCRBY', ledger, 'fenced_rejections', 1)
    return false
  end
  if number > seen or not same_store then
    -- The token as sent: a czxid above 2^32 keeps every digit.
    redis.call('HSET', ledger, seen_field, token, store_field, store)
  end
  return true
end
