-- KEYS: stock, ledger, units, served, lock, requests, sections, request_times,
-- orders, returns, returned_units, epochs
-- ARGV: stock, only_if_absent (1|0), buckets (how many buckets the SKU's
-- stock is split into, recorded on every ledger of it: lua-sharded's check)
-- Resets one SKU: stock, ledger, lock, remembered requests and witness,
-- the order stream and the units given back, atomically. The newest
-- fencing tokens seen (per source, in the ledger) go with the ledger: a
-- holder frozen across the reset read the old epoch, and the epoch check
-- refuses its write; only the `fenced` token counter (another key) stays,
-- so its tokens never go backwards. The epoch changes: a section that read
-- the stock before the reset finds its write refused, so no sale of the old
-- stock lands in the new ledger. It is never reused, not even by a Redis
-- that came back empty (its orders in PostgreSQL name their epoch): Redis's
-- clock in microseconds, or one more than the last if the clock stepped
-- back; below 2^53, exact in Lua's numbers, and written with %.0f (a number
-- argument is written with %.14g, rounded). Every epoch opened is kept in
-- `epochs`, which no reset deletes.
if ARGV[2] == '1' and redis.call('EXISTS', KEYS[1]) == 1
    and redis.call('HEXISTS', KEYS[2], 'epoch') == 1 then
  return 0
end
local kept = redis.call('HMGET', KEYS[2], 'epoch')
local now = redis.call('TIME')
local epoch = string.format('%.0f', math.max(tonumber(kept[1] or '0') + 1,
  tonumber(now[1]) * 1000000 + tonumber(now[2])))
redis.call('ZADD', KEYS[12], epoch, epoch)
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8],
  KEYS[9], KEYS[10], KEYS[11])
redis.call('SET', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], 'initial', ARGV[1], 'buckets', ARGV[3], 'epoch', epoch)
return 1
