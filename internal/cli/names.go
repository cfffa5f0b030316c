package cli

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/nettrace-dev/nettrace/internal/kube"
)

// nameFromAPI names pods, nodes and Services from the Kubernetes API (the
// pods over what the node's own files name), when nettrace has an API to
// ask. An API that
// does not answer or refuses costs a warning, never the capture: the
// names are a help, the packets are the job.
func (c *capture) nameFromAPI() {
	if c.f.kubeconfig == "none" {
		return
	}
	cfg, err := kube.Config(c.f.kubeconfig)
	if errors.Is(err, kube.ErrNoAPI) {
		return
	}
	if err != nil {
		c.log.Warn().Err(err).Msg("pods, nodes and Services are not named from the Kubernetes API")
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.closers = append(c.closers, cancel)
	var told atomic.Bool
	dir, err := kube.Watch(ctx, cfg, func(err error) {
		// Once: the watches retry with backoff for the whole run.
		if !told.Swap(true) {
			c.log.Warn().Err(err).Msg("Kubernetes API: listing pods, nodes and Services failed; retrying")
		}
	})
	if err != nil {
		cancel()
		c.log.Warn().Err(err).Msg("pods, nodes and Services are not named from the Kubernetes API")
		return
	}
	c.apiListed = make(chan struct{})
	go func() {
		defer close(c.apiListed)
		wait, stop := context.WithTimeout(ctx, listWait)
		defer stop()
		if !dir.Listed(wait) {
			if ctx.Err() == nil {
				c.log.Warn().Str("api", cfg.Host).Msgf("pods, nodes and Services not listed within %s (the API unreachable, or this identity not allowed to list them): named once they are", listWait)
			}
			return
		}
		_, pods := dir.PodAddresses()
		_, nodes := dir.NodeAddresses()
		_, services := dir.ServiceFrontends()
		c.log.Info().Str("api", cfg.Host).Int("pod_addresses", len(pods)).Int("node_addresses", len(nodes)).
			Int("service_frontends", services.Len()).Msg("naming pods, nodes and Services from the Kubernetes API")
	}()
	c.sources.Pods = kube.Over(dir.PodAddresses, c.sources.Pods)
	c.sources.Nodes = dir.NodeAddresses
	c.sources.Services = dir.ServiceFrontends
}

// listWait is how long the API may take to list pods, nodes and Services before a
// warning says so.
const listWait = 10 * time.Second
