-- The section's read: the stock and the epoch it belongs to, in one
-- atomic step. Read apart (even pipelined), a reset could land between
-- them and pair the old stock with the new epoch: the write would then pass
-- the epoch check with a stale value.
-- KEYS: stock, ledger
-- Returns {stock or false, epoch or false}.
return {redis.call('GET', KEYS[1]), redis.call('HGET', KEYS[2], 'epoch')}
