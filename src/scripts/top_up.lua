-- redis-then-pg: Redis's stock of a SKU catches up with the database's,
-- the truth, after units were lost on the way between the two (a Redis
-- answer lost after its script ran, an instance killed between Redis and
-- the commit, a give-back that could not reach Redis).
-- KEYS: stock, ledger, units, returned_units
-- ARGV: the ledger's epoch and the stock as read, the database's remaining
-- Returns how many units were given back: 0 when anything moved since the
-- read (a sale, a reset, another instance's catch-up) or nothing is short.
-- Units given back are the lowest sold ones, each joining returned_units
-- (which every sale sells first) with its sales counted down by one, as
-- give_back.lua does: selling one again is not a duplicate.
local l = redis.call('HMGET', KEYS[2], 'epoch', 'initial')
if l[1] ~= ARGV[1] then return 0 end
local stock = tonumber(redis.call('GET', KEYS[1]) or '')
local target, initial = tonumber(ARGV[3]), tonumber(l[2])
if not (stock and target and initial) or stock ~= tonumber(ARGV[2]) or target <= stock then
  return 0
end
local back = {}
local unit = math.max(stock, 0) + 1
while #back < target - stock and unit <= initial do
  local offset = string.format('#%d', initial - unit)
  if redis.call('BITFIELD', KEYS[3], 'GET', 'u2', offset)[1] > 0 then
    back[#back + 1] = unit
    redis.call('BITFIELD', KEYS[3], 'OVERFLOW', 'SAT', 'INCRBY', 'u2', offset, -1)
    redis.call('RPUSH', KEYS[4], unit)
  end
  unit = unit + 1
end
if #back == 0 then return 0 end
redis.call('INCRBY', KEYS[1], #back)
redis.call('HINCRBY', KEYS[2], 'returned', #back)
-- Announced as a unit given back is: the sold-out marks of the SKU go.
redis.call('PUBLISH', 'stocklock:given_back', string.match(KEYS[1], '{(.*)}'))
return #back
