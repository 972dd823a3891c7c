-- An expired reservation gives its unit back to the stock, once.
-- KEYS: stock, ledger, units, returns, returned_units
-- ARGV: epoch, sale, unit
-- Returns 'returned', 'again' (this sale's unit was given back before:
-- nothing changes) or 'stale' (the SKU was reset since the sale: its unit
-- belongs to old stock, nothing changes).
-- The unit joins returned_units, which every sale path sells first; the
-- stock counts it again; the ledger counts the return and the unit's sales
-- go down by one, so that selling it again is not a duplicate.
local l = redis.call('HMGET', KEYS[2], 'epoch', 'initial')
if l[1] ~= ARGV[1] then return 'stale' end
-- Checked before the first write (Redis keeps the writes a script made
-- before an error): the unit has a place among the stock's units.
local initial, unit = tonumber(l[2]), tonumber(ARGV[3])
if not (initial and unit) or unit < 1 or unit > initial or unit % 1 ~= 0 then
  error('unit ' .. ARGV[3] .. ' is not one of the ' .. tostring(l[2])
    .. ' units of the stock: nothing given back')
end
if redis.call('HSETNX', KEYS[4], ARGV[2], ARGV[3]) == 0 then return 'again' end
redis.call('INCR', KEYS[1])
redis.call('RPUSH', KEYS[5], ARGV[3])
redis.call('HINCRBY', KEYS[2], 'returned', 1)
redis.call('BITFIELD', KEYS[3], 'OVERFLOW', 'SAT',
  'INCRBY', 'u2', '#' .. (initial - unit), -1)
-- Announced like a reset (marks.rs's GIVEN_BACK_CHANNEL, the message the
-- SKU): the instances' sold-out marks of the SKU hide this unit otherwise.
redis.call('PUBLISH', 'stocklock:given_back', string.match(KEYS[1], '{(.*)}'))
return 'returned'
