module github.com/svcplatform/conventions/pgstore

go 1.25.0

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/stretchr/testify v1.12.1
	github.com/svcplatform/conventions v0.1.0
	github.com/svcplatform/conventions/internal/testkit v0.1.0
)

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)

replace (
	github.com/svcplatform/conventions => ../
	github.com/svcplatform/conventions/internal/testkit => ../internal/testkit
)
