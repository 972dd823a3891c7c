-- Claim a request id for one attempt of a lock variant's section, or answer
-- from its record. Counts the answers it gives itself.
-- KEYS: requests, ledger, served, request_times
-- ARGV: request_id, attempt token, hold ms (how long the claim stands),
--       instance, how long ids are remembered (ms), how many ids the SKU
--       may remember
-- Returns {'claimed', ''}; {'done', record} (a retry: the first answer,
-- counted as a replay); {'pending', ''} (another attempt holds the claim:
-- counted busy); {'full', ''} (a new id, and the SKU remembers as many as
-- it may: counted busy).
-- Checked before the first write (Redis keeps the writes a script made
-- before an error).
local cap = tonumber(ARGV[6])
if not (tonumber(ARGV[3]) and tonumber(ARGV[5]) and cap) then error('bad hold, ttl or cap: nothing written') end
local entry = redis.call('HGET', KEYS[1], ARGV[1])
local now = now_ms()
if entry then
  local deadline = claim_deadline(entry)
  if deadline == nil then
    record(KEYS[2], nil, KEYS[3], ARGV[4], 'replay', '')
    return {'done', entry}
  end
  if deadline > now then
    record(KEYS[2], nil, KEYS[3], ARGV[4], 'busy', '')
    return {'pending', ''}
  end
  -- A dead attempt's claim: taken over.
elseif not room_for_id(KEYS[1], KEYS[4], now, ARGV[5], cap) then
  record(KEYS[2], nil, KEYS[3], ARGV[4], 'busy', '')
  return {'full', ''}
end
redis.call('HSET', KEYS[1], ARGV[1], 'pending:' .. ARGV[2] .. ':' .. (now + tonumber(ARGV[3])))
remember(KEYS[1], KEYS[4], ARGV[1], now, ARGV[5], ARGV[5])
return {'claimed', ''}
