-- Read the stock for a holder whose fencing token is admitted, and the
-- epoch it was read in, in one atomic step.
-- KEYS: stock, ledger   ARGV: token source, its store, token
-- Returns {stock or false, epoch or false}, or false when the token is stale.
if not admit(KEYS[2], ARGV[1], ARGV[2], ARGV[3]) then
  return false
end
return {redis.call('GET', KEYS[1]), redis.call('HGET', KEYS[2], 'epoch')}
