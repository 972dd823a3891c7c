-- Records an answer that sold nothing (sold out, busy, a replay) and, when
-- the attempt holds its request id's claim, settles it: a final answer is
-- kept for retries ('sold_out:N'), a busy one frees the id ('').
-- KEYS: ledger, served, requests
-- ARGV: instance, kind (sold_out | busy | replay; '' counts nothing),
--       request_id ('' for none), claim token, final record ('' frees the id)
if ARGV[2] ~= '' then record(KEYS[1], nil, KEYS[2], ARGV[1], ARGV[2], '') end
if ARGV[3] ~= '' then
  local entry = redis.call('HGET', KEYS[3], ARGV[3])
  if owns(entry, ARGV[4]) then
    if ARGV[5] == '' then
      redis.call('HDEL', KEYS[3], ARGV[3])
    else
      redis.call('HSET', KEYS[3], ARGV[3], ARGV[5])
    end
  end
end
return 1
