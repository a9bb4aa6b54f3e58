package redisstore

// The Lua scripts behind IdempotencyStore. Each runs atomically on the server, so every store method
// is one round trip (EVALSHA; go-redis falls back to EVAL once per server when the script cache is
// empty). KEYS[1] is the record, KEYS[2] the scope's token counter; both carry the scope's hash tag, so
// they share a cluster slot.
//
// A record is a hash:
//
//	st    "i" in flight, "c" completed
//	fp    the 32-byte fingerprint
//	tok   the fencing token (decimal)
//	lease lease end, exp retention end: fixed-width nanosecond strings (see idemTime) that compare
//	      as strings exactly as the instants compare, so no precision is lost to Lua's doubles
//	cms   the claim's now in Unix milliseconds, to turn an absolute retention into a relative TTL
//	code, hdr, body  the stored response; hdr and body are absent when they were nil
//
// The counter is a hash too: n is the last token handed out in the scope, x the latest retention end
// of any record that used it. The counter lives at least that long, so a token is never handed out
// twice while any claim that held it could still act. A new counter starts at a random point below
// 2^52 (Lua's doubles hold integers exactly up to 2^53), so tokens of different scopes do not meet
// either: a token from one scope fences nothing in another. Tokens are formatted with %d, never
// tostring, which would switch to exponent notation for large numbers.

// idemClaimLua decides a claim. ARGV: fp, now, leaseUntil, expiresAt (idemTime strings), ttl ms
// (expiresAt-now, rounded up), now in Unix ms, and a random start for a new scope's counter. Replies:
//
//	{"n", tok}                             claimed (new record or takeover)
//	{"i", tok, lease}                      in flight under a live lease
//	{"c", tok, lease, code, hdr, body}     completed
//	{"f", st, fp, lease}                   a different fingerprint: nothing changed
const idemClaimLua = `
local r = redis.call('HMGET', KEYS[1], 'st', 'fp', 'tok', 'lease', 'exp', 'code', 'hdr', 'body')
if r[1] and r[5] > ARGV[2] then
	if r[2] ~= ARGV[1] then
		return {'f', r[1], r[2], r[4]}
	end
	if r[1] == 'c' then
		return {'c', r[3], r[4], r[6], r[7], r[8]}
	end
	if r[4] > ARGV[2] then
		return {'i', r[3], r[4]}
	end
end
redis.call('HSETNX', KEYS[2], 'n', ARGV[7])
local tok = string.format('%d', redis.call('HINCRBY', KEYS[2], 'n', 1))
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'st', 'i', 'fp', ARGV[1], 'tok', tok, 'lease', ARGV[3], 'exp', ARGV[4], 'cms', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
local x = redis.call('HGET', KEYS[2], 'x')
if (not x) or x < ARGV[4] then
	redis.call('HSET', KEYS[2], 'x', ARGV[4])
	redis.call('PEXPIRE', KEYS[2], ARGV[5])
end
return {'n', tok}
`

// idemCompleteLua stores a response for the owner of ARGV[1]. ARGV: token, status code, expiresAt
// (idemTime), expiresAt in Unix ms (rounded up), has-header flag, header, has-body flag, body.
// Replies 1 when stored, 0 when the token does not own the record.
const idemCompleteLua = `
local r = redis.call('HMGET', KEYS[1], 'st', 'tok', 'cms')
if r[1] ~= 'i' or r[2] ~= ARGV[1] then
	return 0
end
redis.call('HSET', KEYS[1], 'st', 'c', 'code', ARGV[2], 'exp', ARGV[3])
if ARGV[5] == '1' then
	redis.call('HSET', KEYS[1], 'hdr', ARGV[6])
end
if ARGV[7] == '1' then
	redis.call('HSET', KEYS[1], 'body', ARGV[8])
end
local ttl = tonumber(ARGV[4]) - tonumber(r[3])
if ttl < 1 then
	redis.call('DEL', KEYS[1])
	return 1
end
redis.call('PEXPIRE', KEYS[1], ttl)
local x = redis.call('HGET', KEYS[2], 'x')
if (not x) or x < ARGV[3] then
	redis.call('HSET', KEYS[2], 'x', ARGV[3])
	redis.call('PEXPIRE', KEYS[2], ttl)
end
return 1
`

// idemRenewLua moves the lease end of the in-flight record that ARGV[1] owns to ARGV[2] (idemTime).
const idemRenewLua = `
local r = redis.call('HMGET', KEYS[1], 'st', 'tok')
if r[1] ~= 'i' or r[2] ~= ARGV[1] then
	return 0
end
redis.call('HSET', KEYS[1], 'lease', ARGV[2])
return 1
`

// idemReleaseLua deletes the in-flight record that ARGV[1] owns.
const idemReleaseLua = `
local r = redis.call('HMGET', KEYS[1], 'st', 'tok')
if r[1] ~= 'i' or r[2] ~= ARGV[1] then
	return 0
end
redis.call('DEL', KEYS[1])
return 1
`
