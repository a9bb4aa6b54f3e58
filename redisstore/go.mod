module github.com/svcplatform/conventions/redisstore

go 1.25.0

require (
	github.com/redis/go-redis/v9 v9.22.0
	github.com/stretchr/testify v1.12.1
	github.com/svcplatform/conventions v0.1.0
	github.com/svcplatform/conventions/internal/testkit v0.1.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/klauspost/cpuid/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.47.0 // indirect
)

replace (
	github.com/svcplatform/conventions => ../
	github.com/svcplatform/conventions/internal/testkit => ../internal/testkit
)
