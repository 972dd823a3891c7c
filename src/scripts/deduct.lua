-- The `lua` variant: the whole critical section as one script. Redis runs a
-- script to the end before it serves anything else, so no lock is needed.
-- KEYS: stock, ledger, units, served, requests   ARGV: instance, request_id ('' for none)
-- Returns {kind, unit, remaining}: kind 1 sold, 0 sold out, and 2 / 3 for a
-- retry of an earlier sale / sold-out, repeated and not sold again.
if ARGV[2] ~= '' then
  local earlier = redis.call('HGET', KEYS[5], ARGV[2])
  if earlier then
    record(KEYS[2], KEYS[3], KEYS[4], ARGV[1], 'replay', '')
    local kind, a, b = string.match(earlier, '^(%a[%a_]*):(-?%d+):?(-?%d*)$')
    if kind == 'sold' then
      return {2, tonumber(a), tonumber(b)}
    end
    return {3, 0, tonumber(a)}
  end
end
local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
if stock <= 0 then
  record(KEYS[2], KEYS[3], KEYS[4], ARGV[1], 'sold_out', '')
  if ARGV[2] ~= '' then redis.call('HSET', KEYS[5], ARGV[2], 'sold_out:' .. stock) end
  return {0, 0, stock}
end
redis.call('SET', KEYS[1], stock - 1)
record(KEYS[2], KEYS[3], KEYS[4], ARGV[1], 'sold', tostring(stock))
if ARGV[2] ~= '' then redis.call('HSET', KEYS[5], ARGV[2], 'sold:' .. stock .. ':' .. (stock - 1)) end
return {1, stock, stock - 1}
