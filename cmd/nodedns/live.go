package main

import "github.com/nodedns/nodedns/reconcile"

// Integrations register what they add to a reconcile.Node here, each from an init() in a file of its
// own, so cmd wires them without one file knowing them all. Sources and actors run only on the live
// node (reconcile.Node ignores them under --root); validators run everywhere.
var (
	sourceFactories    []func(g *globals) reconcile.Source
	actorFactories     []func(g *globals) reconcile.Actor
	validatorFactories []func(g *globals) reconcile.Validator
)

func (g *globals) node() *reconcile.Node {
	n := &reconcile.Node{Root: g.root, Config: g.cfg, Log: g.log}
	for _, f := range sourceFactories {
		if s := f(g); s != nil {
			n.Sources = append(n.Sources, s)
		}
	}
	for _, f := range actorFactories {
		if a := f(g); a != nil {
			n.Actors = append(n.Actors, a)
		}
	}
	for _, f := range validatorFactories {
		if v := f(g); v != nil {
			n.Validators = append(n.Validators, v)
		}
	}
	return n
}
