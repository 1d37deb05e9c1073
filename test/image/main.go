// Command image builds the fencepost container image without a Docker
// engine, and unpacks one, so CI can prove the image starts (test/image.sh).
//
//	image build  --binary bin/fencepost --out fencepost.tar [--tag fencepost:dev] [--ca-bundle FILE]
//	image unpack --in fencepost.tar --root DIR
//
// build writes a docker-loadable tarball (`docker load -i`, `crane push`)
// of a FROM-scratch image: the static binary as /fencepost (the
// entrypoint), the CA roots, /etc/passwd and /etc/group naming the
// non-root user 65532 the image runs as, and the directories it writes
// (/var/lib/fencepost, /tls, /tmp). unpack extracts the image's filesystem
// into DIR and prints its entrypoint and user, one per line.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// user is the non-root user and group the image runs as (distroless's
// "nonroot"), the owner of the directories it writes.
const user = 65532

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: image build|unpack [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = build(os.Args[2:])
	case "unpack":
		err = unpack(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want build or unpack", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// entry is one file of the image's only layer.
type entry struct {
	name string
	mode int64
	uid  int
	dir  bool
	body []byte
}

func build(args []string) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	bin := fs.String("binary", "", "static fencepost binary")
	out := fs.String("out", "", "image tarball to write")
	tag := fs.String("tag", "fencepost:dev", "image reference recorded in the tarball")
	roots := fs.String("ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "CA roots to ship")
	version := fs.String("version", "dev", "org.opencontainers.image.version label")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *bin == "" || *out == "" {
		return errors.New("build: --binary and --out are required")
	}
	exe, err := os.ReadFile(*bin)
	if err != nil {
		return err
	}
	if bytes.Contains(exe, []byte("/lib64/ld-linux")) || bytes.Contains(exe, []byte("/lib/ld-linux")) {
		return fmt.Errorf("build: %s is dynamically linked; build it with CGO_ENABLED=0", *bin)
	}
	ca, err := os.ReadFile(*roots)
	if err != nil {
		return fmt.Errorf("build: CA roots: %w", err)
	}
	files := []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, body: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, body: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, body: ca},
		{name: "fencepost", mode: 0o755, body: exe},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, uid: user, dir: true},
		{name: "tls/", mode: 0o755, uid: user, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "var/", mode: 0o755, dir: true},
		{name: "var/lib/", mode: 0o755, dir: true},
		{name: "var/lib/fencepost/", mode: 0o755, uid: user, dir: true},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.uid, ModTime: epoch, Typeflag: tar.TypeReg, Size: int64(len(f.body))}
		if f.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(f.body); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layerTar := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH // test/image.sh builds the binary for the host
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", user, user),
		Entrypoint: []string{"/fencepost"},
		Cmd:        []string{"help"},
		WorkingDir: "/var/lib/fencepost",
		Env:        []string{"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		ExposedPorts: map[string]struct{}{
			"7400/tcp": {}, "7401/tcp": {}, "7480/tcp": {}, "7481/tcp": {}, "7490/tcp": {},
		},
		Volumes: map[string]struct{}{"/var/lib/fencepost": {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":   "fencepost",
			"org.opencontainers.image.source":  "https://github.com/fencepost/fencepost",
			"org.opencontainers.image.version": *version,
		},
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	ref, err := name.NewTag(*tag)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(*out, ref, img)
}

func unpack(args []string) error {
	fs := flag.NewFlagSet("unpack", flag.ContinueOnError)
	in := fs.String("in", "", "image tarball")
	root := fs.String("root", "", "directory to extract the filesystem into")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *root == "" {
		return errors.New("unpack: --in and --root are required")
	}
	img, err := tarball.ImageFromPath(*in, nil)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	if err := extract(tar.NewReader(rc), *root); err != nil {
		return err
	}
	fmt.Println(strings.Join(cf.Config.Entrypoint, " "))
	fmt.Println(cf.Config.User)
	return nil
}

// extract writes regular files and directories under root, keeping modes
// (and, as root, owners); anything else, or a path leaving root, is an error.
func extract(tr *tar.Reader, root string) error {
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(root, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("unpack: %s: unexpected entry type %q", h.Name, h.Typeflag)
		}
		if err := os.Chmod(p, os.FileMode(h.Mode&0o777)|modeBits(h.Mode)); err != nil {
			return err
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
				return err
			}
		}
	}
}

func modeBits(m int64) os.FileMode {
	var out os.FileMode
	if m&0o1000 != 0 {
		out |= os.ModeSticky
	}
	return out
}
