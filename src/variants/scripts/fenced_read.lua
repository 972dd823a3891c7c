-- Read the stock for a holder whose fencing token is admitted.
-- KEYS: stock, ledger   ARGV: token
-- Returns the stock, or nil when the token is stale.
if not admit(KEYS[2], ARGV[1]) then
  return false
end
return tonumber(redis.call('GET', KEYS[1]) or '0')
