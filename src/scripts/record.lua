-- KEYS: ledger, units, served   ARGV: instance, outcome, unit
record(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3])
return 1
