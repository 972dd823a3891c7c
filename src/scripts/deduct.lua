-- The `lua` variant: the whole critical section as one script. Redis runs a
-- script to the end before it serves anything else, so no lock is needed.
-- KEYS: stock, ledger, units, served, requests, request_times, orders,
-- returned_units
-- ARGV: instance, request_id ('' for none), final ('1'; '0' when a sold-out
-- answer here is not final: lua-sharded tries the next bucket, and only the
-- last one tried records the request), buckets (lua-sharded: the bucket
-- count the caller believes the SKU has; '' for no check), how long
-- request ids are remembered (ms), orders ('' for none; 'queue': the sale
-- becomes an order, which the caller enqueues itself; 'stream': this
-- script enqueues it, XADD to the orders stream, in the same atomic step),
-- how many request ids the SKU may remember, how long a sold-out answer's
-- record is kept (ms; it is safe to repeat, so briefly), the order's
-- token (with orders: the buyer's proof, kept with the order)
-- Units given back by expired reservations (returned_units) are sold
-- first, with orders or without.
-- Returns {kind, unit, remaining, started, sale, epoch, at}.
-- Kind: 1 sold, 0 sold out, 2 / 3 for a retry of an earlier sale /
-- sold-out, repeated and not sold again, 4 when the caller's bucket count
-- is out of date (unit = the right one; nothing was read or recorded), 5
-- when another attempt holds the request id's claim (busy), 6 when the SKU
-- was never stocked (nothing recorded), 7 when the request's id is new
-- and the SKU remembers as many as it may (counted busy; a sold-out answer
-- is given all the same, its record not kept). Started: when the script ran, for
-- the timeline, on Redis's clock (TIME, microseconds since the Unix epoch;
-- 0 when the SKU's ledger has timeline = '0', and for kinds 4 and 6). The
-- script is one moment on the timeline: Redis runs one at a time, for a few
-- microseconds, and a second TIME at its end would cost a sale more than
-- that instant tells. For a sale that becomes an order: its sale number in
-- the epoch (the ledger's sold after it), the epoch, and Redis's time of
-- the sale (ms); 0 otherwise.
-- The hot path (a sale without a request id) makes six calls: HMGET,
-- TIME, GET, DECR, HINCRBY and BITFIELD (the GET, so that the unit is
-- checked before anything is written). Without a request id the
-- instance counts its answer (`served`) itself and adds it to the ledger
-- later (every second, and before anyone reads a state); with one, this
-- script counts it, with the request's record.
local l = redis.call('HMGET', KEYS[2], 'initial', 'buckets', 'epoch', 'timeline', 'returned')
local started = 0
if l[4] ~= '0' then
  local t = redis.call('TIME')
  started = t[1] * 1000000 + t[2]
end
local function done(kind, unit, remaining, sale, epoch, at)
  return {kind, unit, remaining, started, sale or 0, epoch or 0, at or 0}
end
if ARGV[4] ~= '' then
  local buckets = l[2] or '0'
  if buckets ~= ARGV[4] then return {4, tonumber(buckets), 0, 0, 0, 0, 0} end
end
-- A reset writes initial, buckets and epoch together.
if not l[1] then return {6, 0, 0, 0, 0, 0, 0} end
local now = 0
local earlier = nil
if ARGV[2] ~= '' then
  now = now_ms()
  earlier = redis.call('HGET', KEYS[5], ARGV[2])
  if earlier then
    local deadline = claim_deadline(earlier)
    if deadline == nil then
      record(KEYS[2], KEYS[3], KEYS[4], ARGV[1], 'replay', '')
      local kind, a, b = string.match(earlier, '^(%a[%a_]*):(-?%d+):?(-?%d*)$')
      if kind == 'sold' then
        return done(2, tonumber(a), tonumber(b))
      end
      return done(3, 0, tonumber(a))
    end
    if deadline > now then
      record(KEYS[2], KEYS[3], KEYS[4], ARGV[1], 'busy', '')
      return done(5, 0, 0)
    end
    -- The claim of an attempt presumed dead: this one decides the id now.
  end
end
-- Everything that can fail is checked before the first write (Redis keeps
-- the writes a script made before an error): the stock is a number and the
-- unit to sell has a place among the ledger's units.
local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
if not stock or stock % 1 ~= 0 then error('the stock is not an integer: nothing written') end
local cap = tonumber(ARGV[7])
if ARGV[2] ~= '' and not (tonumber(ARGV[5]) and cap and tonumber(ARGV[8])) then
  error('bad request id ttl, cap or sold-out keep: nothing written')
end
if ARGV[6] == 'stream' then
  local kind = redis.call('TYPE', KEYS[7])['ok']
  if kind ~= 'stream' and kind ~= 'none' then error('the orders key is not a stream: nothing written') end
end
if stock <= 0 then
  if ARGV[3] == '0' then return done(0, 0, stock) end
  if ARGV[2] ~= '' then
    record(KEYS[2], KEYS[3], KEYS[4], ARGV[1], 'sold_out', '')
    if earlier or room_for_id(KEYS[5], KEYS[6], now, ARGV[5], cap) then
      redis.call('HSET', KEYS[5], ARGV[2], 'sold_out:' .. stock)
      remember(KEYS[5], KEYS[6], ARGV[2], now, ARGV[5], ARGV[8])
    end
  end
  return done(0, 0, stock)
end
if ARGV[2] ~= '' and not earlier and not room_for_id(KEYS[5], KEYS[6], now, ARGV[5], cap) then
  record(KEYS[2], KEYS[3], KEYS[4], ARGV[1], 'busy', '')
  return done(7, 0, 0)
end
-- The unit: one given back (the stock counts it) or the next one down.
-- Only a SKU that ever had a unit given back (the ledger's `returned`)
-- looks for one: the hot path pays nothing for it. lua-sharded's buckets
-- never have any (only order SKUs give units back, and they are not split).
local unit, back = stock, false
if (l[5] or '0') ~= '0' then
  back = redis.call('LINDEX', KEYS[8], 0)
  if back then unit = tonumber(back) or back end
end
local offset = unit_offset(l[1], unit)
-- The writes.
if back then redis.call('LPOP', KEYS[8]) end
redis.call('DECR', KEYS[1])
local sale = redis.call('HINCRBY', KEYS[2], 'sold', 1)
sold_unit(KEYS[2], KEYS[3], offset)
if ARGV[2] ~= '' then
  redis.call('HINCRBY', KEYS[4], ARGV[1], 1)
  redis.call('HSET', KEYS[5], ARGV[2], 'sold:' .. unit .. ':' .. (stock - 1))
  remember(KEYS[5], KEYS[6], ARGV[2], now, ARGV[5], ARGV[5])
end
if ARGV[6] == '' then return done(1, unit, stock - 1) end
local at = now
if at == 0 then at = now_ms() end
local epoch = l[3] or '0'
if ARGV[6] == 'stream' then
  redis.call('XADD', KEYS[7], '*', 'unit', unit, 'sale', sale, 'epoch', epoch,
    'request_id', ARGV[2], 'instance', ARGV[1], 'at', at, 'token', ARGV[9])
end
return done(1, unit, stock - 1, sale, tonumber(epoch), at)
