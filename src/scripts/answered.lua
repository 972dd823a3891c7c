-- Records an answer that sold nothing (sold out, busy, a replay) and, when
-- the attempt holds its request id's claim, settles it: a final answer is
-- kept for retries ('sold_out:N', briefly: repeating it is safe), a busy
-- one frees the id ('').
-- KEYS: ledger, served, requests, request_times
-- ARGV: instance, kind (sold_out | busy | replay; '' counts nothing),
--       request_id ('' for none), claim token, final record ('' frees the id),
--       how long ids are remembered (ms), how long a sold-out record is kept (ms)
-- Checked before the first write (Redis keeps the writes a script made
-- before an error).
local ttl, keep = tonumber(ARGV[6]), tonumber(ARGV[7])
if ARGV[5] ~= '' and not (ttl and keep) then error('bad ttl or keep: nothing written') end
if ARGV[2] ~= '' then record(KEYS[1], nil, KEYS[2], ARGV[1], ARGV[2], '') end
if ARGV[3] ~= '' then
  local entry = redis.call('HGET', KEYS[3], ARGV[3])
  if owns(entry, ARGV[4]) then
    if ARGV[5] == '' then
      redis.call('HDEL', KEYS[3], ARGV[3])
    else
      redis.call('HSET', KEYS[3], ARGV[3], ARGV[5])
      if string.sub(ARGV[5], 1, 9) == 'sold_out:' then
        -- Forgotten `keep` from now by the sweep (see remember).
        redis.call('ZADD', KEYS[4], 'XX', now_ms() - (ttl - math.min(keep, ttl)), ARGV[3])
      end
    end
  end
end
return 1
