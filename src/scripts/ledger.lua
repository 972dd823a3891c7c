-- The ledger: the truth every measurement is read from. Only scripts write
-- it, and a sale is recorded by the same script that writes the stock, so
-- no variant's lock (or lack of one) can separate a sale from its record.
--   ledger: hash initial, epoch, buckets, sold, duplicates, busy, replays,
--           unknown, lost_locks, renewals, fenced_rejections, and per
--           fencing token source fence_seen:SOURCE, fence_store:SOURCE
--   units:  bitfield, two bits per unit: how many times it was sold (0 to
--           3, saturating), unit u at field #(initial - u), so that the
--           field grows with the units sold, not with the stock
--   served: hash instance -> requests answered
-- The second sale of a unit makes it a duplicate; the third does not count
-- again. Every script checks all that can fail before its first write
-- (Redis keeps the writes a script made before an error): a sale takes its
-- unit's offset from unit_offset first, which raises the error, and writes
-- after.

-- The bitfield offset of `unit` among the `initial` units of the stock
-- (1 to initial), or an error for a unit that has no place there (a stock
-- set above the ledger's initial by hand).
local function unit_offset(initial, unit)
  local i, u = tonumber(initial), tonumber(unit)
  if not (i and u) or u < 1 or u > i or u % 1 ~= 0 then
    error('unit ' .. tostring(unit) .. ' is not one of the ' .. tostring(initial)
      .. ' units of the stock: nothing written')
  end
  -- Formatted as an integer: a Lua number concatenated or passed to
  -- redis.call is printed as a float (%.14g / %.17g), a sale's costliest step.
  return string.format('#%d', i - u)
end

-- Counts one sale of the unit at `offset` (from unit_offset).
local function sold_unit(ledger, units, offset)
  local times = redis.call('BITFIELD', units, 'OVERFLOW', 'SAT',
    'INCRBY', 'u2', offset, '1')[1]
  if times == 2 then
    redis.call('HINCRBY', ledger, 'duplicates', '1')
  end
end

-- `offset`: the sold unit's (from unit_offset), for a sale only.
local function record(ledger, units, served, instance, outcome, offset)
  redis.call('HINCRBY', served, instance, '1')
  if outcome == 'sold' then
    redis.call('HINCRBY', ledger, 'sold', '1')
    sold_unit(ledger, units, offset)
  elseif outcome == 'busy' then
    redis.call('HINCRBY', ledger, 'busy', '1')
  elseif outcome == 'replay' then
    redis.call('HINCRBY', ledger, 'replays', '1')
  end
end

-- Request ids (requests: hash request_id -> record). A record is final
-- ('sold:UNIT:REMAINING', 'sold_out:REMAINING') or a claim of the attempt
-- under way: 'pending:TOKEN:DEADLINE_MS'. A claim past its deadline (Redis
-- time) belongs to an attempt presumed dead: the next attempt takes it over,
-- and the dead one's late write, if it ever comes, finds the claim no longer
-- its own and is refused (the claim is a fence).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The deadline of a claim, or nil for a final record.
local function claim_deadline(entry)
  local deadline = string.match(entry, '^pending:[%w]+:(%d+)$')
  return deadline and tonumber(deadline)
end

-- Forgets a few (`limit`, 32 if nil) of the ids first seen more than
-- `ttl` ms ago: the records of request ids live about that long, and each
-- new id does a bounded share of the sweep. Returns the ids forgotten.
local function forget(requests, times, now, ttl, limit)
  local old = redis.call('ZRANGEBYSCORE', times, '-inf', now - tonumber(ttl), 'LIMIT', 0, limit or 32)
  local gone = {}
  for _, old_id in ipairs(old) do
    local entry = redis.call('HGET', requests, old_id)
    local deadline = entry and claim_deadline(entry)
    if deadline and deadline > now then
      -- A claim still standing (an attempt under way): look again later.
      redis.call('ZADD', times, now, old_id)
    else
      redis.call('HDEL', requests, old_id)
      redis.call('ZREM', times, old_id)
      gone[#gone + 1] = old_id
    end
  end
  return gone
end

-- Remembers request id `id` for `keep` ms (at most `ttl`: a sold-out answer,
-- safe to repeat, is kept briefly) as if first seen `ttl - keep` ms before
-- now, so that one sweep serves both; then forgets a few old ids.
local function remember(requests, times, id, now, ttl, keep)
  redis.call('ZADD', times, 'NX', now - (tonumber(ttl) - math.min(tonumber(keep), tonumber(ttl))), id)
  forget(requests, times, now, ttl)
end

-- Whether a new request id may be remembered: fewer than `cap` are (the
-- old ones forgotten first when at the cap). A SKU's ids are bounded, so a
-- flood of distinct ids costs Redis a bounded memory.
local function room_for_id(requests, times, now, ttl, cap)
  if redis.call('ZCARD', times) < cap then return true end
  forget(requests, times, now, ttl)
  return redis.call('ZCARD', times) < cap
end

-- Whether the record is the claim of the attempt with this token.
local function owns(entry, token)
  local prefix = 'pending:' .. token .. ':'
  return entry and string.sub(entry, 1, #prefix) == prefix
end
