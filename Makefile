# pcmkimg: run as root on a Debian 12 machine.
.PHONY: test demo bench lint deps rpm clean

deps:
	sh packaging/install-deps.sh

test: deps
	tox -e lint,py

demo: deps
	tox -e demo

bench: deps
	tox -e bench

lint:
	tox -e lint

rpm:
	sh packaging/build-rpm.sh

clean:
	rm -rf .tox build dist *.egg-info .pytest_cache
