-- The ledger's fields a sale reads (initial, buckets, epoch, timeline,
-- returned) and the moment it runs on Redis's clock (TIME, microseconds
-- since the Unix epoch; 0 when the SKU's timeline is off).
local function ledger_and_moment(ledger)
  local l = redis.call('HMGET', ledger, 'initial', 'buckets', 'epoch', 'timeline', 'returned')
  local started = 0
  if l[4] ~= '0' then
    local t = redis.call('TIME')
    started = t[1] * 1000000 + t[2]
  end
  return l, started
end

-- One buyer's sale: what deduct.lua does after it read the ledger's
-- fields (l: HMGET initial, buckets, epoch, timeline, returned) and
-- Redis's time (started; 0 when the SKU's timeline is off). deduct.lua
-- calls it once; deduct_batch.lua only for a SKU that had units given back
-- or was never stocked, once per buyer of its batch, all of them with the
-- batch's one read and one moment (nothing a sale writes changes those
-- five fields); its other batches are coalesced. KEYS and ARGV as
-- deduct.lua's.
local function deduct(KEYS, ARGV, l, started)
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
  local sale = redis.call('HINCRBY', KEYS[2], 'sold', '1')
  sold_unit(KEYS[2], KEYS[3], offset)
  if ARGV[2] ~= '' then
    redis.call('HINCRBY', KEYS[4], ARGV[1], '1')
    redis.call('HSET', KEYS[5], ARGV[2], 'sold:' .. unit .. ':' .. (stock - 1))
    remember(KEYS[5], KEYS[6], ARGV[2], now, ARGV[5], ARGV[5])
  end
  if ARGV[6] == '' then return done(1, unit, stock - 1) end
  local at = now
  if at == 0 then at = now_ms() end
  local epoch = l[3] or '0'
  if ARGV[6] == 'stream' and ARGV[10] then
    -- A scheduled buyer's (chaos mode): its worker stops at a gate.
    redis.call('XADD', KEYS[7], '*', 'unit', unit, 'sale', sale, 'epoch', epoch,
      'request_id', ARGV[2], 'instance', ARGV[1], 'at', at, 'token', ARGV[9],
      'schedule', ARGV[10])
  elseif ARGV[6] == 'stream' then
    redis.call('XADD', KEYS[7], '*', 'unit', unit, 'sale', sale, 'epoch', epoch,
      'request_id', ARGV[2], 'instance', ARGV[1], 'at', at, 'token', ARGV[9])
  end
  return done(1, unit, stock - 1, sale, tonumber(epoch), at)
end
