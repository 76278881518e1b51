-- ident_remove: deletes a credisson client's identity record when the client is freed.
-- KEYS[1]    the record: hash "{credisson}:client:<uuid>"
-- KEYS[2]    the registry: zset "{credisson}:clients"
-- ARGV[1]    the client's uuid
-- Returns    1
redis.call('del', KEYS[1])
redis.call('zrem', KEYS[2], ARGV[1])
return 1
