-- The `lua-batch` variant: the buyers of one SKU that queued at one
-- instance while its previous batch was in flight, sold in one script.
-- Each buyer is sold exactly as deduct.lua sells one (the same function,
-- `deduct`, run once per buyer in queue order): its own unit or its own
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
local l, started = ledger_and_moment(KEYS[2])
local out = {}
local argv = {ARGV[1], '', '1', '', ARGV[2], '', ARGV[3], ARGV[4], ''}
for i = 5, #ARGV do
  argv[2] = ARGV[i]
  local answer = deduct(KEYS, argv, l, started)
  for j = 1, 7 do out[#out + 1] = answer[j] end
end
return out
