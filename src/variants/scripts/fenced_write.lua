-- Write the stock for a holder whose fencing token is admitted: a holder
-- that woke from a pause after a newer holder came is refused here,
-- whatever it believes.
-- KEYS: stock, ledger   ARGV: token, new stock
-- Returns 1, or nil when the token is stale.
if not admit(KEYS[2], ARGV[1]) then
  return false
end
redis.call('SET', KEYS[1], ARGV[2])
return 1
