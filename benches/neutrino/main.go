// The comparison the header benchmarks are read against: neutrino (lnd's light client,
// v0.17.1) importing the same chain a lightwire tab syncs, the 925,000-header generated
// regtest chain and its BIP158 filter headers, into its own stores on disk
// (headerfs over bbolt, as lnd runs it), through its chainimport package.
//
//	go run . -headers FILE -filter-headers FILE [-fast-add] [-batch N]
//
// FILE: raw 80-byte headers from genesis (lightwire-chain generate) and raw 32-byte
// filter headers from genesis (lightwire-hostile --write-filter-headers). They are wrapped
// in chainimport's file format (a 10-byte prefix: network magic, version 0, header type,
// start height) untimed; the import is timed from Import() to its return, with full
// header checks (blockchain.BFNone) or -fast-add (blockchain.BFFastAdd: no proof-of-work
// or difficulty checks). Prints one JSON line: seconds, headers per second, peak RSS.
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/btcsuite/btcd/blockchain"
	"github.com/btcsuite/btcd/chaincfg"
	"github.com/btcsuite/btcwallet/walletdb"
	_ "github.com/btcsuite/btcwallet/walletdb/bdb"
	"github.com/lightninglabs/neutrino/chainimport"
	"github.com/lightninglabs/neutrino/headerfs"
)

// wrap writes raw headers of one type to path in chainimport's file format.
func wrap(raw, path string, params *chaincfg.Params, kind headerfs.HeaderType) error {
	data, err := os.ReadFile(raw)
	if err != nil {
		return err
	}
	var prefix bytes.Buffer
	binary.Write(&prefix, binary.LittleEndian, uint32(params.Net))
	prefix.WriteByte(0) // version 0: uncompressed
	prefix.WriteByte(byte(kind))
	binary.Write(&prefix, binary.LittleEndian, uint32(0)) // from genesis
	return os.WriteFile(path, append(prefix.Bytes(), data...), 0o644)
}

func main() {
	headers := flag.String("headers", "", "raw 80-byte headers from genesis")
	filterHeaders := flag.String("filter-headers", "", "raw 32-byte filter headers from genesis")
	fastAdd := flag.Bool("fast-add", false, "skip proof-of-work and difficulty checks (BFFastAdd)")
	batch := flag.Int("batch", 50_000, "headers written per batch (WriteBatchSizePerRegion)")
	flag.Parse()
	if *headers == "" || *filterHeaders == "" {
		fmt.Fprintln(os.Stderr, "give -headers and -filter-headers")
		os.Exit(2)
	}
	if err := run(*headers, *filterHeaders, *fastAdd, *batch); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(headers, filterHeaders string, fastAdd bool, batch int) error {
	params := chaincfg.RegressionNetParams
	dir, err := os.MkdirTemp("", "neutrino-import-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	blockFile := filepath.Join(dir, "headers.import")
	filterFile := filepath.Join(dir, "filter-headers.import")
	if err := wrap(headers, blockFile, &params, headerfs.Block); err != nil {
		return err
	}
	if err := wrap(filterHeaders, filterFile, &params, headerfs.RegularFilter); err != nil {
		return err
	}
	db, err := walletdb.Create("bdb", filepath.Join(dir, "neutrino.db"), true, 60*time.Second)
	if err != nil {
		return err
	}
	defer db.Close()
	blockStore, err := headerfs.NewBlockHeaderStore(dir, db, &params)
	if err != nil {
		return err
	}
	filterStore, err := headerfs.NewFilterHeaderStore(dir, db, headerfs.RegularFilter, &params, nil)
	if err != nil {
		return err
	}
	flags := blockchain.BFNone
	if fastAdd {
		flags = blockchain.BFFastAdd
	}
	imp, err := chainimport.NewHeadersImport(&chainimport.ImportOptions{
		TargetChainParams:       params,
		TargetBlockHeaderStore:  blockStore,
		TargetFilterHeaderStore: filterStore,
		BlockHeadersSource:      blockFile,
		FilterHeadersSource:     filterFile,
		WriteBatchSizePerRegion: batch,
		ValidationFlags:         flags,
	})
	if err != nil {
		return err
	}
	t0 := time.Now()
	result, err := imp.Import(context.Background())
	if err != nil {
		return err
	}
	seconds := time.Since(t0).Seconds()
	_, tip, err := blockStore.ChainTip()
	if err != nil {
		return err
	}
	var usage syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &usage)
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"fastAdd":          fastAdd,
		"seconds":          seconds,
		"added":            result.AddedCount,
		"tip":              tip,
		"headersPerSecond": float64(tip) / seconds,
		"peakRssMiB":       float64(usage.Maxrss) / 1024,
	})
}
