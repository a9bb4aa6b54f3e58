module github.com/svcplatform/conventions

go 1.25.0

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/stretchr/testify v1.11.1 // indirect
	golang.org/x/time v0.14.0 // indirect
)
