-- The `lua` variant: the whole critical section as one script. Redis runs a
-- script to the end before it serves anything else, so no lock is needed.
-- KEYS: stock, ledger, units, served   ARGV: instance
-- Returns {sold (1|0), unit, remaining}.
local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
if stock <= 0 then
  record(KEYS[2], KEYS[3], KEYS[4], ARGV[1], 'sold_out', '')
  return {0, 0, stock}
end
redis.call('SET', KEYS[1], stock - 1)
record(KEYS[2], KEYS[3], KEYS[4], ARGV[1], 'sold', tostring(stock))
return {1, stock, stock - 1}
