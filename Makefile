# pcmkimg: run as root on a Debian 12 machine.
.PHONY: test test-debian13 demo bench lint deps rpm collection clean

deps:
	sh packaging/install-deps.sh

test: deps
	tox -e lint,py

# The same `make test` inside a Debian 13 (trixie) root: packaging/debian13.sh.
test-debian13:
	sh packaging/debian13.sh

demo: deps
	tox -e demo

# ONLY=GROUP[,GROUP] runs those groups alone (agents, status, restart, offline), e.g.
# make bench ONLY=restart; docs/benchmarks.md.
bench: deps
	tox -e bench $(if $(ONLY),-- --only $(ONLY))

lint:
	tox -e lint

rpm:
	sh packaging/build-rpm.sh

# The Ansible collection pcmkimg.cluster: build/pcmkimg-cluster-VERSION.tar.gz (ansible-core).
collection:
	mkdir -p build
	ansible-galaxy collection build ansible_collections/pcmkimg/cluster --output-path build --force

clean:
	rm -rf .tox build dist *.egg-info .pytest_cache
