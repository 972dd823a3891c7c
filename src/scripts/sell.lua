-- The section's write and its record, as one step: the stock is set and the
-- sale recorded together, or neither happens. The variants keep the taught
-- shape (read, work, write); only their write is this script.
-- KEYS: stock, ledger, units, served, requests, returned_units
-- ARGV: new stock, unit the section read, instance, epoch the stock was read in,
--       request_id ('' for none), claim token, fencing token ('' for none),
--       the token's source and store (see fence.lua)
-- A unit given back by an expired reservation is sold first (the stock
-- the section read counts it): selling the unit read would sell one that
-- is already sold and strand the returned one.
-- Returns {'sold', unit sold}; {'stale', ''} when the fencing token is older than
-- the newest seen; {'reset', ''} when the SKU was reset since the read;
-- {'claim_lost', record} when the request id is no longer this attempt's.
-- What can fail is checked before the first write (Redis keeps the writes
-- a script made before an error): the new stock is an integer and, in the
-- epoch the stock was read in, the unit has a place among the ledger's
-- units. Then the fence: a holder whose lock was taken over is told so,
-- whatever else changed meanwhile.
local l = redis.call('HMGET', KEYS[2], 'epoch', 'initial', 'returned')
local new_stock = tonumber(ARGV[1])
if not new_stock or new_stock % 1 ~= 0 then error('the new stock is not an integer: nothing written') end
local same_epoch = (l[1] or '') == ARGV[4]
local unit, back = ARGV[2], false
if same_epoch and (l[3] or '0') ~= '0' then
  back = redis.call('LINDEX', KEYS[6], 0)
  if back then unit = back end
end
local offset = same_epoch and unit_offset(l[2], unit)
if ARGV[7] ~= '' and not admit(KEYS[2], ARGV[8], ARGV[9], ARGV[7]) then
  return {'stale', ''}
end
if not same_epoch then
  return {'reset', ''}
end
if ARGV[5] ~= '' then
  local entry = redis.call('HGET', KEYS[5], ARGV[5])
  if not owns(entry, ARGV[6]) then return {'claim_lost', entry or ''} end
end
if back then redis.call('LPOP', KEYS[6]) end
redis.call('SET', KEYS[1], ARGV[1])
record(KEYS[2], KEYS[3], KEYS[4], ARGV[3], 'sold', offset)
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[5], ARGV[5], 'sold:' .. unit .. ':' .. ARGV[1])
end
return {'sold', unit}
