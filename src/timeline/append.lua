-- One batch of sections onto a SKU's timeline (see append_sections).
-- KEYS: sections, ledger
-- ARGV: the batch ("COUNT|JSON"), its count, keep
return append_sections(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
