// Command protogen compiles the project's .proto files and writes the Go code
// protoc-gen-go and protoc-gen-go-vtproto would write, without a protoc
// binary: the compiler is bufbuild/protocompile, the generators are
// protoc-gen-go's own package and planetscale/vtprotobuf's (features marshal,
// unmarshal and size: reflection-free codecs that nodewire uses on every
// frame), all pinned in tools/go.mod. Output is deterministic, so `make
// proto-check` can compare it byte for byte with the committed code.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/bufbuild/protocompile"
	_ "github.com/planetscale/vtprotobuf/features/marshal"
	_ "github.com/planetscale/vtprotobuf/features/size"
	_ "github.com/planetscale/vtprotobuf/features/unmarshal"
	vtgen "github.com/planetscale/vtprotobuf/generator"
	gengo "google.golang.org/protobuf/cmd/protoc-gen-go/internal_gengo"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/pluginpb"
)

func main() {
	importPath := flag.String("I", "proto", "import path holding the .proto files")
	out := flag.String("out", ".", "output root; files land at their go_package path below -module")
	module := flag.String("module", "", "Go module prefix stripped from output paths")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "protogen: usage: protogen -I DIR -out DIR -module MOD file.proto...")
		os.Exit(2)
	}
	if err := run(*importPath, *out, *module, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "protogen:", err)
		os.Exit(1)
	}
}

func run(importPath, out, module string, files []string) error {
	comp := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{importPath}}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	compiled, err := comp.Compile(context.Background(), files...)
	if err != nil {
		return fmt.Errorf("compile: %w", err)
	}
	req := &pluginpb.CodeGeneratorRequest{FileToGenerate: files}
	if module != "" {
		req.Parameter = proto.String("module=" + module)
	}
	seen := map[string]bool{}
	// CodeGeneratorRequest wants every file's dependencies before the file.
	var addFile func(f protoreflect.FileDescriptor)
	addFile = func(f protoreflect.FileDescriptor) {
		if seen[f.Path()] {
			return
		}
		seen[f.Path()] = true
		imports := f.Imports()
		for i := 0; i < imports.Len(); i++ {
			addFile(imports.Get(i).FileDescriptor)
		}
		req.ProtoFile = append(req.ProtoFile, protodesc.ToFileDescriptorProto(f))
	}
	for _, f := range compiled {
		addFile(f)
	}
	gen, err := protogen.Options{}.New(req)
	if err != nil {
		return fmt.Errorf("generator: %w", err)
	}
	for _, f := range gen.Files {
		if f.Generate {
			gengo.GenerateFile(gen, f)
			generateWireChecks(gen, f)
		}
	}
	vt, err := vtgen.NewGenerator(gen, []string{"marshal", "unmarshal", "size"}, &vtgen.Config{
		Poolable: vtgen.NewObjectSet(), PoolableExclude: vtgen.NewObjectSet(),
	})
	if err != nil {
		return fmt.Errorf("vtproto generator: %w", err)
	}
	vt.Generate()
	resp := gen.Response()
	if resp.Error != nil {
		return fmt.Errorf("generate: %s", resp.GetError())
	}
	for _, f := range resp.File {
		path := filepath.Join(out, f.GetName())
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(f.GetContent()), 0o644); err != nil {
			return err
		}
	}
	return nil
}
