// Command netecho is the PodConfig test and demo workload: an unprivileged program that prints
// its network interfaces (again whenever they change, so the pod's log shows attachments
// arrive and go), answers UDP and TCP echo on $ECHO_PORT (default 7777) on every address, and
// serves a small control API on $CONTROL_PORT (default 8080) so a test can make the pod send
// traffic without exec:
//
//	GET /interfaces                 the interfaces and addresses, JSON
//	GET /send?to=IP:PORT&proto=udp  send one echo request from this pod, JSON with the reply and
//	                                the source address the peer saw (proves the path taken)
//	GET /healthz
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Iface is one interface as /interfaces reports it.
type Iface struct {
	Name  string   `json:"name"`
	MTU   int      `json:"mtu"`
	Up    bool     `json:"up"`
	Addrs []string `json:"addrs"`
}

// Reply is what an echo server answers: the request's payload and the source address it saw.
type Reply struct {
	Payload  string `json:"payload"`
	SeenFrom string `json:"seenFrom"`
	Server   string `json:"server"`
}

func interfaces() ([]Iface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	out := make([]Iface, 0, len(ifs))
	for _, i := range ifs {
		addrs, _ := i.Addrs()
		f := Iface{Name: i.Name, MTU: i.MTU, Up: i.Flags&net.FlagUp != 0, Addrs: []string{}}
		for _, a := range addrs {
			f.Addrs = append(f.Addrs, a.String())
		}
		sort.Strings(f.Addrs)
		out = append(out, f)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, nil
}

func describe(ifs []Iface) string {
	var b strings.Builder
	for _, i := range ifs {
		fmt.Fprintf(&b, "  %-15s mtu %-5d up=%-5v %s\n", i.Name, i.MTU, i.Up, strings.Join(i.Addrs, " "))
	}
	return b.String()
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	host, _ := os.Hostname()
	echoPort, controlPort := env("ECHO_PORT", "7777"), env("CONTROL_PORT", "8080")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	udp, err := net.ListenPacket("udp", ":"+echoPort)
	if err != nil {
		log.Fatalf("udp echo: %v", err)
	}
	go serveUDP(udp, host)
	tcp, err := net.Listen("tcp", ":"+echoPort)
	if err != nil {
		log.Fatalf("tcp echo: %v", err)
	}
	go serveTCP(tcp, host)

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /interfaces", func(w http.ResponseWriter, _ *http.Request) {
		ifs, err := interfaces()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(ifs)
	})
	mux.HandleFunc("GET /send", func(w http.ResponseWriter, r *http.Request) {
		to, proto := r.URL.Query().Get("to"), r.URL.Query().Get("proto")
		if proto == "" {
			proto = "udp"
		}
		rep, err := send(proto, to, "ping from "+host)
		if err != nil {
			log.Printf("send %s %s: %v", proto, to, err)
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		log.Printf("send %s %s: %s answered, saw us as %s", proto, to, rep.Server, rep.SeenFrom)
		_ = json.NewEncoder(w).Encode(rep)
	})
	srv := &http.Server{Addr: ":" + controlPort, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
			log.Fatalf("control: %v", err)
		}
	}()
	log.Printf("netecho %s: echo on udp+tcp :%s, control on :%s, uid %d", host, echoPort, controlPort, os.Getuid())

	var last string
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		if ifs, err := interfaces(); err == nil {
			if d := describe(ifs); d != last {
				fmt.Printf("interfaces of %s:\n%s", host, d)
				last = d
			}
		}
		select {
		case <-ctx.Done():
			_ = srv.Close()
			return
		case <-t.C:
		}
	}
}

func serveUDP(c net.PacketConn, host string) {
	buf := make([]byte, 2048)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			return
		}
		b, _ := json.Marshal(Reply{Payload: string(buf[:n]), SeenFrom: from.String(), Server: host})
		_, _ = c.WriteTo(b, from)
	}
}

func serveTCP(l net.Listener, host string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				return
			}
			b, _ := json.Marshal(Reply{Payload: strings.TrimSuffix(line, "\n"), SeenFrom: c.RemoteAddr().String(), Server: host})
			_, _ = c.Write(append(b, '\n'))
		}()
	}
}

func send(proto, to, payload string) (Reply, error) {
	var rep Reply
	c, err := net.DialTimeout(proto, to, 2*time.Second)
	if err != nil {
		return rep, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	msg := payload
	if proto == "tcp" {
		msg += "\n"
	}
	if _, err := c.Write([]byte(msg)); err != nil {
		return rep, err
	}
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	if err != nil {
		return rep, err
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(string(buf[:n]))), &rep); err != nil {
		return rep, fmt.Errorf("reply %q: %w", buf[:n], err)
	}
	if rep.Payload != payload {
		return rep, fmt.Errorf("echo %q, sent %q", rep.Payload, payload)
	}
	return rep, nil
}
