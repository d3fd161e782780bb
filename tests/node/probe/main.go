// Command probe is the one program in the node tests' images (tests/node/images.py packs it, static, into OCI
// tarballs that containerd imports: there is no registry here).
//
//	probe pause  is the pod sandbox's pause process: sleep until SIGTERM/SIGINT, reap children.
//	probe        prints its environment and the /dev tree (what the device plugin's Allocate made the runtime give
//	             the container), one "env NAME=VALUE" / "dev PATH TYPE MAJOR:MINOR" line each, then "probe ready",
//	             and sleeps until SIGTERM so the pod stays Running and the kubelet has something to kill.
package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	if len(os.Args) > 1 && os.Args[1] == "pause" {
		go reap()
		<-stop
		return
	}
	env := os.Environ()
	sort.Strings(env)
	for _, kv := range env {
		fmt.Printf("env %s\n", kv)
	}
	_ = filepath.WalkDir("/dev", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			fmt.Printf("dev %s error %v\n", path, err)
			return nil
		}
		var st syscall.Stat_t
		if lerr := syscall.Lstat(path, &st); lerr != nil {
			return nil
		}
		kind := "other"
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFCHR:
			kind = "char"
		case syscall.S_IFBLK:
			kind = "block"
		case syscall.S_IFDIR:
			kind = "dir"
		case syscall.S_IFLNK:
			kind = "link"
		case syscall.S_IFREG:
			kind = "file"
		}
		major, minor := (st.Rdev>>8)&0xfff, (st.Rdev&0xff)|((st.Rdev>>12)&0xfff00)
		fmt.Printf("dev %s %s %d:%d\n", path, kind, major, minor)
		return nil
	})
	fmt.Println("probe ready")
	<-stop
}

// reap collects exited children, as a pod's pause process (PID 1 of a shared PID namespace) must.
func reap() {
	sigchld := make(chan os.Signal, 16)
	signal.Notify(sigchld, syscall.SIGCHLD)
	for range sigchld {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
