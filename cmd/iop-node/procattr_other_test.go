//go:build !linux

package main

import "syscall"

// gatewayProcAttr: without a parent-death signal, an iop-node started
// by a test that is killed runs on until stopped by hand.
func gatewayProcAttr() *syscall.SysProcAttr { return nil }
