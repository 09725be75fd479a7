// Only integration tests live in this package (tests/).
