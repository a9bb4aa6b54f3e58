module github.com/svcplatform/conventions/internal/testkit

go 1.25.0

require (
	github.com/stretchr/testify v1.12.1
	github.com/svcplatform/conventions v0.1.0
)

require (
	github.com/google/uuid v1.6.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)

replace github.com/svcplatform/conventions => ../..
