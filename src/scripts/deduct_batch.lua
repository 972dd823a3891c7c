-- The `lua-batch` variant: the buyers of one SKU that queued at one
-- instance while its previous batch was in flight, sold in one script.
-- Each buyer gets what deduct.lua would have given it had the buyers been
-- sold one after the other in queue order: its own unit or its own
-- sold-out answer, its request id checked and recorded, its sale in the
-- ledger. Redis runs the whole batch as one atomic step, so no other
-- command falls between two of its buyers either.
-- KEYS: as deduct.lua's (stock, ledger, units, served, requests,
-- request_times, orders, returned_units)
-- ARGV: instance, how long request ids are remembered (ms), how many the
-- SKU may remember, how long a sold-out answer's record is kept (ms), then
-- one request id per buyer ('' for none), in queue order.
-- Returns deduct.lua's seven numbers per buyer, one after the other. The
-- batch is one moment on the timeline: its ledger fields are read once
-- and Redis's time taken once (a sale changes none of those fields).
--
-- The batch is coalesced: the buyers are decided first, on the stock read
-- once and a view of their ids' records, then written together: one
-- DECRBY for the units the batch sold, `sold` counted once, the units
-- marked in one BITFIELD, the ids' records in one HSET and one ZADD, the
-- answers counted in one HINCRBY each. Per buyer, only what is truly its
-- own: its id's record (one HGET to read it) and its unit's field.
local l, started = ledger_and_moment(KEYS[2])
local out, o = {}, 0
-- One buyer's seven numbers, appended to the answer.
local function emit(kind, unit, remaining)
  out[o + 1], out[o + 2], out[o + 3], out[o + 4] = kind, unit, remaining, started
  out[o + 5], out[o + 6], out[o + 7] = 0, 0, 0
  o = o + 7
end

-- A SKU never stocked, or one that had units given back (the next unit
-- may be one of them, from its list): one buyer after the other, each with
-- deduct.lua's own sale. lua-batch's SKUs have no orders, so the second
-- happens only to a SKU another variant sold with orders.
if not l[1] or (l[5] or '0') ~= '0' then
  local argv = {ARGV[1], '', '1', '', ARGV[2], '', ARGV[3], ARGV[4], ''}
  for i = 5, #ARGV do
    argv[2] = ARGV[i]
    local a = deduct(KEYS, argv, l, started)
    for j = 1, 7 do out[o + j] = a[j] end
    o = o + 7
  end
  return out
end

-- Everything that can fail is checked before the first write: the stock,
-- the arguments, and the units the batch may sell (the stock's top unit
-- down to one unit per buyer: every one has a place among the ledger's).
local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
if not stock or stock % 1 ~= 0 then error('the stock is not an integer: nothing written') end
local ttl, cap, keep = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local with_ids = false
for i = 5, #ARGV do
  if ARGV[i] ~= '' then with_ids = true end
end
if with_ids and not (ttl and cap and keep) then
  error('bad request id ttl, cap or sold-out keep: nothing written')
end
if stock > 0 then
  unit_offset(l[1], stock)
  unit_offset(l[1], math.max(1, stock - (#ARGV - 4) + 1))
end
-- Redis's time in ms for the ids' records: the batch's moment when it took one.

-- The batch's sales: `sold` units from the stock's top one down (units
-- stock, stock - 1, ...), counted, marked and taken from the stock once.
local function write_units(sold)
  if sold == 0 then return end
  redis.call('DECRBY', KEYS[1], sold)
  redis.call('HINCRBY', KEYS[2], 'sold', sold)
  local ops = {'OVERFLOW', 'SAT'}
  -- unit_offset(initial, unit) for each unit, checked above for the range.
  local first = tonumber(l[1]) - stock
  for k = 0, sold - 1 do
    local j = 2 + 4 * k
    ops[j + 1], ops[j + 2], ops[j + 3], ops[j + 4] = 'INCRBY', 'u2', string.format('#%d', first + k), '1'
  end
  local duplicates = 0
  for _, times in ipairs(redis.call('BITFIELD', KEYS[3], unpack(ops))) do
    if times == 2 then duplicates = duplicates + 1 end
  end
  if duplicates > 0 then redis.call('HINCRBY', KEYS[2], 'duplicates', duplicates) end
end

if not with_ids then
  -- The hot path, no request ids: the next unit to each buyer while any
  -- is left, then sold out; the instance counts the answers itself.
  local n = #ARGV - 4
  local sold = math.min(math.max(stock, 0), n)
  for k = 1, n do
    if k <= sold then emit(1, stock - k + 1, stock - k) else emit(0, 0, stock - sold) end
  end
  write_units(sold)
  return out
end

local now = math.floor(started / 1000)
if started == 0 then now = now_ms() end

-- Deciding. `view` is what the batch knows of its ids' records: read once
-- (HGET; false for none), then what this batch decided for them, so that
-- an id twice in one batch replays its first answer as it would have one
-- call later.
local left = stock
local view = {}
local records, first_seen = {}, {}
local served, replays, busy = 0, 0, 0
local remembered = 0
-- How many ids the SKU remembers, read when first needed, then counted.
local card = nil
local function room()
  if card == nil then card = redis.call('ZCARD', KEYS[6]) end
  if card < cap then return true end
  -- At the cap: old ids are forgotten first, as room_for_id does. A record
  -- forgotten here is no longer in the view either.
  for _, old in ipairs(forget(KEYS[5], KEYS[6], now, ARGV[2], 32)) do
    if view[old] ~= nil and not records[old] then view[old] = nil end
  end
  card = redis.call('ZCARD', KEYS[6]) + remembered
  return card < cap
end
-- Keeps `id`'s record `entry`, as remember() would, `keep_ms` of the ttl.
local function keep_record(id, entry, new, keep_ms)
  view[id] = entry
  records[id] = entry
  if new then
    first_seen[#first_seen + 1] = now - (ttl - math.min(keep_ms, ttl))
    first_seen[#first_seen + 1] = id
    remembered = remembered + 1
    if card ~= nil then card = card + 1 end
  end
end

for i = 5, #ARGV do
  local id = ARGV[i]
  local earlier = false
  if id ~= '' then
    earlier = view[id]
    if earlier == nil then
      earlier = redis.call('HGET', KEYS[5], id)
      view[id] = earlier
    end
  end
  local deadline = earlier and claim_deadline(earlier)
  if earlier and deadline == nil then
    -- A retry of an id already decided: its first answer, counted a replay.
    served = served + 1
    replays = replays + 1
    local kind, a, b = string.match(earlier, '^(%a[%a_]*):(-?%d+):?(-?%d*)$')
    if kind == 'sold' then
      emit(2, tonumber(a), tonumber(b))
    else
      emit(3, 0, tonumber(a))
    end
  elseif earlier and deadline > now then
    -- Another attempt holds the id's claim.
    served = served + 1
    busy = busy + 1
    emit(5, 0, 0)
  elseif left <= 0 then
    if id ~= '' then
      served = served + 1
      -- A claim of a dead attempt is taken over; a new id needs room.
      if earlier or room() then
        keep_record(id, 'sold_out:' .. left, not earlier, keep)
      end
    end
    emit(0, 0, left)
  elseif id ~= '' and not earlier and not room() then
    served = served + 1
    busy = busy + 1
    emit(7, 0, 0)
  else
    local unit = left
    left = left - 1
    if id ~= '' then
      served = served + 1
      keep_record(id, 'sold:' .. unit .. ':' .. left, not earlier, ttl)
    end
    emit(1, unit, left)
  end
end

-- Writing: the units sold, then the counts and the records, each once.
write_units(stock - left)
if served > 0 then redis.call('HINCRBY', KEYS[4], ARGV[1], served) end
if replays > 0 then redis.call('HINCRBY', KEYS[2], 'replays', replays) end
if busy > 0 then redis.call('HINCRBY', KEYS[2], 'busy', busy) end
local fields = {}
for id, entry in pairs(records) do
  fields[#fields + 1] = id
  fields[#fields + 1] = entry
end
if #fields > 0 then redis.call('HSET', KEYS[5], unpack(fields)) end
if remembered > 0 then
  redis.call('ZADD', KEYS[6], 'NX', unpack(first_seen))
  -- Each new id does a bounded share of the sweep, as remember() does.
  forget(KEYS[5], KEYS[6], now, ARGV[2], 32 * remembered)
end
return out
