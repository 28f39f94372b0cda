// Package pubsub carries messages between hub instances: a Broker
// interface, an in-memory implementation for one instance and a Redis
// implementation for many.
package pubsub
