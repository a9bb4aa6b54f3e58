package redisstore

// The Lua scripts behind IdempotencyStore. Each runs atomically on the server, so every store method
// is one round trip (EVALSHA; go-redis falls back to EVAL once per server when the script cache is
// empty). KEYS[1] is the record, KEYS[2] the scope's token counter, KEYS[3] the scope's quota set; all
// carry the scope's hash tag, so they share a cluster slot.
//
// A record is a hash:
//
//	st    "i" in flight, "c" completed
//	fp    the 32-byte fingerprint
//	tok   the fencing token (decimal)
//	lease lease end, exp retention end: fixed-width nanosecond strings (see idemTime) that compare
//	      as strings exactly as the instants compare, so no precision is lost to Lua's doubles
//	sus   "1" while the record is suspected: its lease lapsed and a claim gave the owner one more
//	      lease instead of taking the key (absent otherwise)
//	cms   the claim's now in Unix milliseconds, to turn an absolute retention into a relative TTL
//	code, hdr, body  the stored response; hdr and body are absent when they were nil
//
// The counter is a hash too: n is the last token handed out in the scope, x the latest retention end
// of any record that used it. The counter lives at least that long, so a token is never handed out
// twice while any claim that held it could still act. A new counter starts at a random point below
// 2^52 (Lua's doubles hold integers exactly up to 2^53), so tokens of different scopes do not meet
// either: a token from one scope fences nothing in another. Tokens are formatted with %d, never
// tostring, which would switch to exponent notation for large numbers.
//
// The quota set is a sorted set of the scope's record keys (the client's Idempotency-Key, not the
// Redis key) scored by their retention end in Unix milliseconds, rounded up. Scores go to Redis as the
// decimal strings Go formats; Redis keeps them as doubles, and Lua compares them as doubles, both exact
// for whole milliseconds below 2^53 (some 285,000 years). A member counts while its score is after the
// claim's now in whole milliseconds (rounded down), and is dropped after that, which is never before
// its record expired: a record may count up to a millisecond past its end, never less than its life.
// The count is read
// (ZCOUNT) before anything is written and stale members are removed only after the record is: Redis
// refuses a script out of memory only at its first write, and only if that write may grow memory, so
// a script that began by deleting would go on to create records in a full Redis. Only a claim with a
// quota adds members; every claim, Complete and Release keeps an existing member in step whether or
// not its own store has a quota (ZADD XX and ZREM change nothing when the set is absent), so one count
// serves every replica. The set's TTL is raised, never lowered, to the TTL of the record it was last
// written for, so it outlives its longest member.

// idemClaimLua decides a claim. ARGV: fp, now, leaseUntil, expiresAt (idemTime strings), ttl ms
// (expiresAt-now, rounded up), now in Unix ms (rounded down), a random start for a new scope's
// counter, the scope's quota (0: none), the quota member (the client's key), and expiresAt in Unix ms
// (rounded up). Replies:
//
//	{"n", tok}                             claimed (a new record or a take-over)
//	{"i", tok, lease}                      in flight: under a live lease, or just marked suspected
//	                                       and leased until ARGV[3]
//	{"c", tok, lease, code, hdr, body}     completed
//	{"f", st, fp, lease}                   a different fingerprint: nothing changed
//	{"q", n}                               a new record over the quota: nothing changed, n live
//
// A lapsed lease is taken over only on the second claim that finds it lapsed: the first marks the
// record suspected and gives it one more lease, because an owner cut off from Redis for longer than a
// lease is still running its handler and would otherwise be replaced while it works. Renew clears the
// mark; a take-over writes a fresh record without it.
const idemClaimLua = `
local r = redis.call('HMGET', KEYS[1], 'st', 'fp', 'tok', 'lease', 'exp', 'code', 'hdr', 'body', 'sus')
local limit = tonumber(ARGV[8])
local fresh = true
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
	if r[9] ~= '1' then
		redis.call('HSET', KEYS[1], 'sus', '1', 'lease', ARGV[3])
		return {'i', r[3], ARGV[3]}
	end
	fresh = false
end
if fresh and limit > 0 then
	local n = redis.call('ZCOUNT', KEYS[3], '(' .. ARGV[6], '+inf')
	local own = redis.call('ZSCORE', KEYS[3], ARGV[9])
	if own and tonumber(own) > tonumber(ARGV[6]) then
		n = n - 1
	end
	if n >= limit then
		return {'q', n}
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
local added
if limit > 0 then
	redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[6])
	added = redis.call('ZADD', KEYS[3], ARGV[10], ARGV[9])
else
	added = redis.call('ZADD', KEYS[3], 'XX', 'CH', ARGV[10], ARGV[9])
end
if limit > 0 or added > 0 then
	if redis.call('PTTL', KEYS[3]) < tonumber(ARGV[5]) then
		redis.call('PEXPIRE', KEYS[3], ARGV[5])
	end
end
return {'n', tok}
`

// idemCompleteLua stores a response for the owner of ARGV[1]. ARGV: token, status code, expiresAt
// (idemTime), expiresAt in Unix ms (rounded up), has-header flag, header, has-body flag, body, the
// quota member. Replies 1 when stored, 0 when the token does not own the record.
//
// The first write is the HSET of the record, so a Redis out of memory (noeviction) refuses the script
// before it changes anything, and the caller sees the OOM error rather than a half-stored response.
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
	redis.call('ZREM', KEYS[3], ARGV[9])
	return 1
end
redis.call('PEXPIRE', KEYS[1], ttl)
local x = redis.call('HGET', KEYS[2], 'x')
if (not x) or x < ARGV[3] then
	redis.call('HSET', KEYS[2], 'x', ARGV[3])
	redis.call('PEXPIRE', KEYS[2], ttl)
end
if redis.call('ZADD', KEYS[3], 'XX', 'CH', ARGV[4], ARGV[9]) > 0 then
	if redis.call('PTTL', KEYS[3]) < ttl then
		redis.call('PEXPIRE', KEYS[3], ttl)
	end
end
return 1
`

// idemRenewLua moves the lease end of the in-flight record that ARGV[1] owns to ARGV[2] (idemTime)
// and clears a suspicion: the owner has shown it is alive.
const idemRenewLua = `
local r = redis.call('HMGET', KEYS[1], 'st', 'tok')
if r[1] ~= 'i' or r[2] ~= ARGV[1] then
	return 0
end
redis.call('HSET', KEYS[1], 'lease', ARGV[2])
redis.call('HDEL', KEYS[1], 'sus')
return 1
`

// idemReleaseLua deletes the in-flight record that ARGV[1] owns and gives its place in the scope's
// quota back at once. ARGV: token, the quota member.
const idemReleaseLua = `
local r = redis.call('HMGET', KEYS[1], 'st', 'tok')
if r[1] ~= 'i' or r[2] ~= ARGV[1] then
	return 0
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[3], ARGV[2])
return 1
`
