module github.com/svcplatform/conventions/benchmarks

go 1.25.0

require (
	github.com/ThreeDotsLabs/watermill v1.5.1
	github.com/ThreeDotsLabs/watermill-sql/v4 v4.1.2
	github.com/danielgtaylor/huma/v2 v2.37.2
	github.com/gofiber/fiber/v3 v3.1.0
	github.com/google/go-github/v75 v75.0.0
	github.com/jackc/pgx/v5 v5.12.0
	github.com/moogar0880/problems v1.0.1
	github.com/redis/go-redis/v9 v9.22.0
	github.com/standard-webhooks/standard-webhooks/libraries v0.0.1
	github.com/stretchr/testify v1.12.1
	github.com/stripe/stripe-go/v85 v85.0.0
	github.com/svcplatform/conventions v0.1.0
	github.com/svcplatform/conventions/examples v0.1.0
	github.com/svcplatform/conventions/internal/testkit v0.1.0
	github.com/svcplatform/conventions/pgstore v0.1.0
	github.com/svcplatform/conventions/redisstore v0.1.0
	github.com/svix/svix-webhooks v1.44.0
	github.com/valyala/fasthttp v1.69.0
)

require (
	github.com/andybalholm/brotli v1.2.0 // indirect
	github.com/cenkalti/backoff/v5 v5.0.3 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/gofiber/schema v1.7.0 // indirect
	github.com/gofiber/utils/v2 v2.0.2 // indirect
	github.com/google/go-querystring v1.1.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/klauspost/compress v1.19.1 // indirect
	github.com/lib/pq v1.10.9 // indirect
	github.com/lithammer/shortuuid/v3 v3.0.7 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/oklog/ulid v1.3.1 // indirect
	github.com/philhofer/fwd v1.2.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/rogpeppe/go-internal v1.16.0 // indirect
	github.com/sony/gobreaker v1.0.0 // indirect
	github.com/svcplatform/conventions/otelconv v0.1.0 // indirect
	github.com/tinylib/msgp v1.6.3 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel v1.46.0 // indirect
	go.opentelemetry.io/otel/metric v1.46.0 // indirect
	go.opentelemetry.io/otel/trace v1.46.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/crypto v0.55.0 // indirect
	golang.org/x/net v0.58.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	gopkg.in/validator.v2 v2.0.1 // indirect
)

replace (
	github.com/svcplatform/conventions => ../
	github.com/svcplatform/conventions/examples => ../examples
	github.com/svcplatform/conventions/internal/testkit => ../internal/testkit
	github.com/svcplatform/conventions/otelconv => ../otelconv
	github.com/svcplatform/conventions/pgstore => ../pgstore
	github.com/svcplatform/conventions/redisstore => ../redisstore
)
