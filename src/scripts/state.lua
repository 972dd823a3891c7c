-- KEYS: stock, ledger, units, served, lock
-- One consistent snapshot of a SKU: stock, ledger counters and the lock.
local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
local l = redis.call('HMGET', KEYS[2], 'initial', 'sold', 'duplicates', 'busy', 'lost_locks', 'renewals', 'fenced_rejections', 'replays', 'buckets', 'unknown', 'returned')
local kind = redis.call('TYPE', KEYS[5])['ok']
local holder = false
if kind == 'string' then
  holder = redis.call('GET', KEYS[5])
elseif kind == 'hash' then
  holder = redis.call('HKEYS', KEYS[5])[1] or false
end
return {
  {stock,
   tonumber(l[1] or '0'), tonumber(l[2] or '0'), tonumber(l[3] or '0'),
   tonumber(l[4] or '0'), tonumber(l[5] or '0'), tonumber(l[6] or '0'),
   tonumber(l[7] or '0'), tonumber(l[8] or '0'), tonumber(l[9] or '0'),
   tonumber(l[10] or '0'), tonumber(l[11] or '0')},
  redis.call('PTTL', KEYS[5]), kind, holder,
  redis.call('HGETALL', KEYS[4]),
  redis.call('HMGET', KEYS[2], 'mark_refusals', 'post_sale_failures'),
}
