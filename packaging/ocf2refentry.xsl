<?xml version="1.0" encoding="UTF-8"?>
<!-- An OCF agent's meta-data (ra-api-1) as a DocBook 4 refentry, for the DocBook XSL
     manpages stylesheet: the page ocf_PROVIDER_AGENT(7), as resource-agents has for its
     agents. Written for pcmkimg (GPL-2.0-or-later); run by packaging/manpages.py. -->
<xsl:stylesheet xmlns:xsl="http://www.w3.org/1999/XSL/Transform" version="1.0">
  <xsl:output method="xml" indent="yes" encoding="UTF-8"/>
  <xsl:param name="provider">pcmkimg</xsl:param>
  <xsl:param name="version"/>
  <xsl:variable name="title" select="concat('ocf_', $provider, '_', /resource-agent/@name)"/>
  <xsl:variable name="agent" select="concat('ocf:', $provider, ':', /resource-agent/@name)"/>

  <xsl:template match="/resource-agent">
    <refentry id="{$title}">
      <refmeta>
        <refentrytitle><xsl:value-of select="$title"/></refentrytitle>
        <manvolnum>7</manvolnum>
        <refmiscinfo class="source">pcmkimg</refmiscinfo>
        <refmiscinfo class="version"><xsl:value-of select="$version"/></refmiscinfo>
        <refmiscinfo class="manual">OCF resource agents</refmiscinfo>
      </refmeta>
      <refnamediv>
        <refname><xsl:value-of select="$title"/></refname>
        <refpurpose><xsl:value-of select="normalize-space(shortdesc)"/></refpurpose>
      </refnamediv>
      <refsynopsisdiv>
        <cmdsynopsis>
          <command><xsl:value-of select="@name"/></command>
          <group choice="req">
            <xsl:for-each select="actions/action">
              <arg choice="plain"><xsl:value-of select="@name"/></arg>
            </xsl:for-each>
          </group>
        </cmdsynopsis>
      </refsynopsisdiv>
      <refsection>
        <title>Description</title>
        <para><xsl:value-of select="normalize-space(longdesc)"/></para>
      </refsection>
      <refsection>
        <title>Supported Parameters</title>
        <variablelist>
          <xsl:apply-templates select="parameters/parameter"/>
        </variablelist>
      </refsection>
      <refsection>
        <title>Supported Actions</title>
        <variablelist>
          <xsl:apply-templates select="actions/action"/>
        </variablelist>
      </refsection>
      <refsection>
        <title>Example</title>
        <para>Usually wired to a bundle by <command>pcmkimg guard add</command>
        BUNDLE (see <citerefentry><refentrytitle>pcmkimg-guard-add</refentrytitle>
        <manvolnum>8</manvolnum></citerefentry>); by hand, with
        <citerefentry><refentrytitle>pcs</refentrytitle><manvolnum>8</manvolnum></citerefentry>:</para>
        <programlisting>pcs resource create p_<xsl:value-of select="@name"/><xsl:text> </xsl:text>
          <xsl:value-of select="$agent"/>
          <xsl:text> \&#10;    </xsl:text>
          <xsl:for-each select="parameters/parameter[@required = '1']">
            <xsl:if test="position() > 1"><xsl:text> </xsl:text></xsl:if><xsl:value-of select="@name"/>=<xsl:value-of select="translate(@name, 'abcdefghijklmnopqrstuvwxyz', 'ABCDEFGHIJKLMNOPQRSTUVWXYZ')"/>
          </xsl:for-each>
          <xsl:text> \&#10;    clone interleave=true</xsl:text></programlisting>
      </refsection>
      <refsection>
        <title>See also</title>
        <para><citerefentry><refentrytitle>pcmkimg</refentrytitle><manvolnum>8</manvolnum></citerefentry>,
        <citerefentry><refentrytitle>pcs</refentrytitle><manvolnum>8</manvolnum></citerefentry>;
        <command>pcs resource describe <xsl:value-of select="$agent"/></command></para>
      </refsection>
    </refentry>
  </xsl:template>

  <xsl:template match="parameter">
    <varlistentry>
      <term><option><xsl:value-of select="@name"/></option></term>
      <listitem>
        <para>
          <xsl:value-of select="normalize-space(longdesc)"/>
          <xsl:text> (</xsl:text>
          <xsl:choose>
            <xsl:when test="@required = '1'">required</xsl:when>
            <xsl:otherwise>optional</xsl:otherwise>
          </xsl:choose>
          <xsl:if test="@unique = '1'">, unique</xsl:if>
          <xsl:text>, </xsl:text><xsl:value-of select="content/@type"/>
          <xsl:choose>
            <xsl:when test="content/@default != ''">
              <xsl:text>, default </xsl:text><literal><xsl:value-of select="content/@default"/></literal>
            </xsl:when>
            <xsl:otherwise>, no default</xsl:otherwise>
          </xsl:choose>
          <xsl:text>)</xsl:text>
        </para>
      </listitem>
    </varlistentry>
  </xsl:template>

  <xsl:template match="action">
    <varlistentry>
      <term><option><xsl:value-of select="@name"/></option></term>
      <listitem>
        <para>
          <xsl:text>Suggested minimum timeout: </xsl:text><xsl:value-of select="@timeout"/>
          <xsl:if test="@interval != ''">
            <xsl:text>; suggested interval: </xsl:text><xsl:value-of select="@interval"/>
          </xsl:if>
          <xsl:text>.</xsl:text>
        </para>
      </listitem>
    </varlistentry>
  </xsl:template>
</xsl:stylesheet>
