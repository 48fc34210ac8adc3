"""What values mean, shared by reading and writing: .NET ticks, vectors, metadata, Arrow types,
type inference, and what a filter's literal and comparison mean."""
