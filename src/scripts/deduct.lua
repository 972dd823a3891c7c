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
return deduct(KEYS, ARGV, l, started)
